"""mlflow."""
