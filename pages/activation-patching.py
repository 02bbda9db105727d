"""/activation-patching on a server's first run: runs app.py, which opens the page (pages/common/routes.py)."""

from pages.common.routes import run_app

run_app()
