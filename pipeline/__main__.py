from pipeline.cli import main

# `python -m pipeline` is the same program as the installed `edgegaze` command
raise SystemExit(main(prog="python -m pipeline"))
