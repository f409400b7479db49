"""The MPI suites under tests/mpi run only when launched by tests/test_mpi_suites.py
(under mpiexec, MTENSOR_MPI_SUITE=1); a plain pytest run collects the launcher instead."""
import os

collect_ignore = [] if os.environ.get("MTENSOR_MPI_SUITE") else ["mpi"]
