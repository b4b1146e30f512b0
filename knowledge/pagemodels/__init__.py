"""Page models: what the Streamlit pages show, computed without Streamlit (unit-tested on their own).

``playground`` -- a timed search with its score distribution, folded and merged hits, filters;
``storemap`` -- a 2-D map of a store's chunks;
``viewer`` -- the document viewer: its URL and what it shows; ``details`` -- a file's details editor;
``sources`` -- the Sources page: a kind's settings form, the sources and their runs as tables.
May import the workbench and everything below it; never ``pages/`` or Streamlit.
"""
