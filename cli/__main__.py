"""``python -m tbuild.cli``: the `tbuild` command, as torchrun starts it on each process."""

from tbuild.cli.app import main

main()
