"""Small reusable widgets: the keyed live table, the status bar, the command bar."""
