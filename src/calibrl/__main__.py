"""`python -m calibrl` (used by `accelerate launch -m calibrl ...`)."""

from calibrl.cli.main import main

main()
