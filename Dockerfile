# The dashboard on the bundled checkpoints: docker build -t laya . && docker run -p 8501:8501 laya
FROM python:3.11-slim
WORKDIR /app
ENV PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
# Deployment mode (README, "Deploying for a team"): no server paths typed by visitors; freed memory goes
# back to the OS at once (glibc would keep the arenas of a large failed load); never a dataset download.
ENV LAYA_ALLOW_PATHS=0 LAYA_DOWNLOAD=0 MALLOC_MMAP_THRESHOLD_=65536
# CPU wheels of torch/torchvision keep the image small; requirements.txt then finds them satisfied.
RUN pip install --index-url https://download.pytorch.org/whl/cpu "torch>=2.3,<2.15" "torchvision>=0.18,<0.30"
COPY requirements.txt .
RUN pip install -r requirements.txt
COPY laya/ laya/
COPY pages/ pages/
COPY models/ models/
COPY app.py .
COPY .streamlit/ .streamlit/
EXPOSE 8501
HEALTHCHECK CMD python -c "import urllib.request; urllib.request.urlopen('http://localhost:8501/_stcore/health')"
CMD ["python", "-m", "streamlit", "run", "app.py", "--server.port=8501", "--server.address=0.0.0.0", "--server.headless=true"]
