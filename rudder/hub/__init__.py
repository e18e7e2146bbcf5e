"""The Hugging Face Hub: its offline switch (offline), published models (models), their files
and card (model_card) and the publish command (publish)."""
