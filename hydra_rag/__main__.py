from hydra_rag.cli import main

main()
