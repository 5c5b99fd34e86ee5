print("homemqtt")
