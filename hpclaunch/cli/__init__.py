"""The command line: one small module per command. Only this layer prints and exits."""
