"""The console (Textual), talking only to `eagle3_tui.session`.

- `factory.make_app`: the one way an app is built (the CLI through `launch.py`, and the tests);
- `app.Eagle3App`: app-wide concerns (themes, keymap, palette, help, screenshots, quit, signals, boot);
- `screens/main.MainScreen`: the status bar, the tabs, one `@on` handler per session event
  (`messages.FromSession`), and the jobs (`jobs.Jobs`) that act on the host;
- `viewmodel`: pure functions from a session snapshot to what the widgets show;
- `widgets/`: each owns its keys, its messages and its CSS, and updates through reactives.
"""
