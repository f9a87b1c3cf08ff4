"""``python -m dsreg``: the same command as the ``dsreg`` script."""

from dsreg.cli import main

if __name__ == "__main__":
    main()
