"""`python -m launcher` is `spark-launch`."""

from launcher.cli import entry

if __name__ == "__main__":
    entry()
