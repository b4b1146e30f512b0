"""Page models: what the Streamlit pages show, computed without Streamlit (unit-tested on their own).

``playground`` -- a timed search with its score distribution, folded and merged hits, filters;
``storemap`` -- a 2-D map of a store's chunks; ``viewer`` -- the document viewer's URL and view.
May import the workbench and everything below it; never ``pages/`` or Streamlit.
"""
