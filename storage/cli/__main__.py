from storage.cli import run

run()
