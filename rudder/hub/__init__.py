"""The Hugging Face Hub: its offline switch (offline), published models (published_models),
their files and card (model_card) and the publish command (publish)."""
