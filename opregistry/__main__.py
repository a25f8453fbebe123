from opregistry.cli import main

main()
