"""Placeholder: being written (issue 4)."""

import streamlit as st

st.title("search")
st.info("Coming soon.")
