from wontopos_mcp.cli.main import main

raise SystemExit(main())
