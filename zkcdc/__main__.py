from zkcdc.cli import main

main()
