"""Checkout: a revision materialised as files in a folder, and a folder switched between
revisions. Read it from ``apply.checkout``, the entry point, which plans fully, then applies:
``plan`` reads what the folder holds (``folder``), compares it with the target and refuses
before anything is touched; ``objects`` vets each object before it is placed and fetches what
the store lacks; ``write`` writes the folder as the plan says, ``links`` the hard or symbolic
links of an empty one; ``fs`` holds the file operations on folder descriptors; ``journal`` the
record that lets an interrupted switch finish.
"""
