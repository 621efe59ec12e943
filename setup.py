"""The one compiled part: the replay scanner's inner loop (eagle3_tui/sglang/_linescan.c).

Optional: where it does not build (no C compiler), replay uses the regex scanner, which reads the
same; `eagle3-tui replay` says which scanner ran.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "eagle3_tui.sglang._linescan",
            ["eagle3_tui/sglang/_linescan.c"],
            extra_compile_args=["-Wall", "-Wextra", "-Wno-unused-parameter"],
            optional=True,
        )
    ]
)
