from shlo2jax.tools.cli import main

raise SystemExit(main())
