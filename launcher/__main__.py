"""`python -m launcher` is `spark-launch`."""

from launcher.cli import main

if __name__ == "__main__":
    main()
