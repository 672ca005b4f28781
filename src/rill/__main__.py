from rill.cli.main import app

app()
