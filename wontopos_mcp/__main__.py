from wontopos_mcp.launch import main

raise SystemExit(main())
