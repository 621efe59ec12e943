"""What the session keeps: the last launch and the undo records on this machine, the changes written and undone, the ledger."""
