"""The spark-submit entry point: the same command line as `zkcdc`, e.g.
`spark-submit ... zkcdc_job.py stream alerts --bootstrap-servers B`."""

from zkcdc.cli import main

if __name__ == "__main__":
    main()
