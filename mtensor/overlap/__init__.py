"""Graph passes for a traced step: bucketing (fuse small collectives), scheduling (start
each collective early, wait late), and the replay that runs the result through ``comm``."""
