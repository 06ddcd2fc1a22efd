from kernelbench.cli import main

main()
