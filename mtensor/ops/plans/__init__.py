"""The data-dependent plans, pure: what an op does once it sees its index arrays or its
values (basic and advanced indexing: ``indexing``; the sample sort: ``sample_sort``; TSQR:
``tsqr``).  Rules in ``ops/`` say which layouts an op takes; these say how the blocks move."""
