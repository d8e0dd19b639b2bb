"""Modal screens: the confirmation that approves mutations, the help listing, and small prompts."""
