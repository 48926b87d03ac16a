"""The app's parts: Streamlit widgets over attention/ results and viz/ figures."""
