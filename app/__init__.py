"""The rudder Gradio app: cross-lingual video search, partial-match annotation, run results.

``python -m app`` serves it; :func:`app.ui.build_app` builds it from a model, a vocabulary
and a dataset. Importing this package turns Gradio analytics and Hugging Face telemetry off
before Gradio is ever imported.
"""

import os

os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"
os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"
