from proxydiag.cli import main

main()
