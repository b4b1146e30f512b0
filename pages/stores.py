"""Placeholder: being written (issue 4)."""

import streamlit as st

st.title("stores")
st.info("Coming soon.")
