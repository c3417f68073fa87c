#!/bin/sh
echo "deploying service"
