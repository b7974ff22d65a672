from pipeline.cli import command

# `python -m pipeline` is the same program as the installed `edgegaze` command
command(prog="python -m pipeline")
