"""The Textual console: views over the marketplace, the fleet and the money, every mutation behind a dialog.

``app.VastuiApp`` is the entry point; it is handed its services (``services.ConsoleServices``) and never builds a
client, a database connection or an SSH session itself.
"""
