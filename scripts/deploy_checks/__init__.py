"""The checks behind scripts/deploy_check.py (`make deploy-check`), one module per kind of file."""
