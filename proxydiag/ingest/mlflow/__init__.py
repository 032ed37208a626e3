"""Reading runs from MLflow: a file store's run folders (``files``), a SQL store's database
read directly (``sql``), a tracking server over REST (``rest``), ``runs:/`` URIs and
experiment searches (``uri``), and the tail of a run that is still
logging (``tail``). Writing results back is :mod:`proxydiag.mlflow`."""
