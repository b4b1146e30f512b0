"""Placeholder: being written (issue 4)."""

import streamlit as st

st.title("files")
st.info("Coming soon.")
