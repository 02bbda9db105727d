"""Dashboard support without Streamlit: the checkpoint catalog, display-ready views and plotly figures."""
