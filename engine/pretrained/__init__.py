"""Pretrained models brought in from other toolkits as ordinary tbuild run directories (``tbuild import``)."""
