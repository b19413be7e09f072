FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md manage.py ./
COPY hub hub
COPY storage storage
COPY templates templates
COPY locale locale
RUN pip install --no-cache-dir '.[server]'
ENV DJANGO_SETTINGS_MODULE=hub.settings PYTHONUNBUFFERED=1
EXPOSE 8000
