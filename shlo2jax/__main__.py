from shlo2jax.cli import main

raise SystemExit(main())
