"""`python -m storage.mount mount|umount ...`: the same subcommands as `hub mount` / `hub umount`."""
import sys

from storage.mount.commands import main

sys.exit(main())
