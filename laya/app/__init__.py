"""Dashboard support without Streamlit: the checkpoint catalog, display-ready tables and plotly figures.

The dashboard's pages only lay out what these return, so everything a page shows is computed here or elsewhere in
``laya`` and tested without a browser.
"""
