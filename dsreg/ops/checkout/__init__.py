"""Checkout: a revision materialised as files in a folder, and a folder switched between
revisions. ``plan`` compares the folder with the target and refuses before anything is touched;
``apply`` carries the plan out (``checkout`` is its entry point); ``fs`` holds the file
operations on folder descriptors; ``journal`` the record that lets an interrupted switch finish.
"""
