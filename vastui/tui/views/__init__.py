"""One module per console view; ``vastui.tui.registry`` lists them."""
