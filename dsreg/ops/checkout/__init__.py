"""Checkout: a revision materialised as files in a folder, and a folder switched between
revisions. Read it from ``apply.checkout``, the entry point: ``plan`` compares the folder with
the target and refuses before anything is touched; ``apply`` carries the plan out; ``objects``
checks each object before it is placed and fetches what the store lacks; ``fs`` holds the file
operations on folder descriptors; ``journal`` the record that lets an interrupted switch finish.
"""
